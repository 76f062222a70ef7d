"""What the data tests share."""

from omegaconf import OmegaConf

from seqforecast.config.schema import CsvDataConfig


def csv_config(**values) -> dict:
    """data=csv's node as a run reads it: the schema's defaults, then `values`."""
    return OmegaConf.to_container(OmegaConf.structured(CsvDataConfig(**values)),
                                  enum_to_str=True)
