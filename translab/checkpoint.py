"""Saving and loading models with the configuration needed to rebuild them."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from .model import ModelConfig, build_language_model
from .paths import ARTIFACTS_DIR, where_to_look

PRETRAINED_PATH = ARTIFACTS_DIR / "pretrained_lm.pt"


def save_checkpoint(path: Path, model: nn.Module, config: ModelConfig, **extra) -> None:
    """The weights with the ``ModelConfig`` that rebuilds them (stored as plain data); ``extra`` as is."""
    if not isinstance(config, ModelConfig):
        raise TypeError(f"save_checkpoint takes a ModelConfig, got {type(config).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    torch.save({"config": config.to_dict(), "state_dict": state, "extra": extra}, path)


def load_checkpoint(path: Path = PRETRAINED_PATH, map_location: str | torch.device = "cpu") -> tuple[nn.Module, dict]:
    """(language model in eval mode, checkpoint dict).  Loads on CPU unless told otherwise, so a
    checkpoint saved on a GPU opens on a laptop."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"checkpoint {path} is missing. The pretrained one is committed to the repository "
            "(`git checkout artifacts/`), or rebuild it with `make pretrain`. " + where_to_look()
        )
    checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(checkpoint, dict) or "config" not in checkpoint or "state_dict" not in checkpoint:
        raise ValueError(f"{path} is not a translab checkpoint (expected keys 'config' and 'state_dict')")
    model = build_language_model(ModelConfig.from_dict(checkpoint["config"]))
    model.load_state_dict(checkpoint["state_dict"])
    model.eval()
    return model, checkpoint
