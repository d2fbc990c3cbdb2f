"""End to end: a real sidecar over HTTP on 127.0.0.1, in front of the stand-in vLLM."""
