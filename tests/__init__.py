"""The test suite: unit/ (one file per sidecar module), e2e/, oracle/, fuzz/, deploy/."""
