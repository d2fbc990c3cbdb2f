"""The thin async shell around the pure core.

``app`` builds both applications and stores each collaborator under its ``keys``;
``server`` runs them and drains on SIGTERM; ``proxy`` walks one inspected request through
the pipeline; ``relay`` forwards to vLLM and streams the answer back; ``rewrite`` splices
downscaled images or extra fields into a body; ``responses`` turns failures into vLLM's or
Anthropic's error bodies; ``allocator`` tunes glibc for multi-megabyte bodies.
"""
