"""What the native kernels' tests share."""

import pytest

from seqforecast.native import build

WHY = build.unavailable()
# A test that runs a C kernel: skipped, with the reason, where none can be built.
needs_kernels = pytest.mark.skipif(WHY is not None, reason=f"no C kernels here: {WHY}")
