"""Weights to and from other implementations: Hugging Face (config.json, safetensors / torch
state dicts) and original Google TF checkpoints, through one name table per family."""
