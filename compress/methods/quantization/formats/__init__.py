"""The quantization formats, one method each (found by the package, not listed)."""
