"""seqforecast's Hydra launcher plugin (Hydra finds launchers in the hydra_plugins package)."""
