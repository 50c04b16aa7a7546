"""fxprobe: acceptance evidence for NVMe-oF arrays that hold LLM KV cache."""

__version__ = "0.1.0"
