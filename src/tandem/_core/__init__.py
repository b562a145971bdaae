"""Shared building blocks every layer may import: errors, clocks, ids."""
