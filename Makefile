# Two commands a new machine needs: `make train` and `make test`; each creates .venv if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU wheel of torch lies on this machine's disk; installing it first means the package's own
# range (torch>=2.4) is already met and pip never pulls a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0

# Where the environment sets PYTHONDONTWRITEBYTECODE (this machine's does), every interpreter
# would compile the project's modules again (0.9 s a process here, and the suite starts ~70) and
# pytest would rewrite every test module's asserts again in each worker (5 s): bytecode goes
# into __pycache__ beside the sources (ignored by git), as Python's default has it.
unexport PYTHONDONTWRITEBYTECODE

# Extra arguments for the training CLI, e.g. make train ARGS="attention=diff block_size=16"
ARGS ?=

.PHONY: venv train test test-fast test-slurm lint tensorboard bench-attention peers bench-realdata gpu-wheels clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH_SPEC)
	$(BIN)/pip install --quiet -e '.[dev,sweep,slurm]'
	touch $@

train: venv
	$(BIN)/python -m seqforecast.train $(ARGS)

# Test files run in parallel, one file per worker at a time (module fixtures are built once),
# each process on one torch thread: with a worker per core, more threads only oversubscribe the
# cores (measured: 17% less wall time, 20% less CPU on two test files, 2 workers, 2 cores).
# The tests marked slurm are left out (test-slurm runs them): they install and start a cluster.
test: venv
	$(BIN)/ruff check seqforecast tests scripts
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n auto --dist loadfile -m "not slurm"

# The quick tier: every test but those marked slow (each trains for more than a few seconds).
test-fast: venv
	$(BIN)/ruff check seqforecast tests scripts
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n auto --dist loadfile -m "not slow and not slurm"

# hydra/launcher=slurm against a real SLURM: a one-node cluster in a temporary folder
# (scripts/slurm_cluster.py installs it with apt-get where missing: as root), a study dispatched
# to it, a job cancelled and continued, a controller that does not answer (about 1.5 minutes;
# skipped in one line where SLURM cannot be had). The durations are each step's wall time.
test-slurm: venv
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m slurm --durations=0 tests/cli/test_slurm_cluster.py

tensorboard: venv
	$(BIN)/tensorboard --logdir outputs

lint: venv
	$(BIN)/ruff check seqforecast tests scripts

bench-attention: venv
	$(BIN)/python scripts/bench_attention.py

# The optional peers of the real-data benchmark; the constraint keeps torch at $(TORCH_SPEC).
peers: venv
	echo "$(TORCH_SPEC)" > $(VENV)/torch-constraint.txt
	$(BIN)/pip install --quiet -c $(VENV)/torch-constraint.txt -e '.[peers]'

bench-realdata: peers
	$(BIN)/python scripts/bench_realdata.py $(ARGS)

# What a lent GPU machine lacks to run the project (it has torch, triton, tqdm, tensorboard, but
# no hydra-core or omegaconf, and nothing can be fetched there): pure-Python wheels in .whl/,
# carried on the visit (docs/operations.md#gpu-kernels-and-the-prepared-visit). antlr4 4.9.3
# has only a source release, so its wheel is built here.
gpu-wheels: venv
	mkdir -p .whl
	$(BIN)/pip download --quiet --no-deps --only-binary=:all: -d .whl hydra-core==1.3.8 omegaconf==2.3.1
	$(BIN)/pip wheel --quiet --no-deps -w .whl antlr4-python3-runtime==4.9.3

clean:
	rm -rf $(VENV) .pytest_cache
