"""Property-based fuzzing with Hypothesis; ``make fuzz`` runs it at scale."""
