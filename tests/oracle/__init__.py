"""Cross-checks against Hugging Face transformers processors (and vLLM, replicated)."""
