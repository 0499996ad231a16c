"""hymt: a self-hosted translation appliance for Tencent's Hunyuan-MT-7B."""

__version__ = "0.1.0"
