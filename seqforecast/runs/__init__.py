"""A whole run: trained start to end (training.py), or loaded back from its run dir
(loading.py). These sit above config/ (they read composed and saved configs); the layers below
(attention, model, data, training) take plain values."""
