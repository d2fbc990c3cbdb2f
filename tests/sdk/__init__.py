"""The official OpenAI and Anthropic SDKs against the stand-in vLLM, through the sidecar."""
