"""The policy file: parsed and validated, held and reloaded by the process, and `signoff policy` offline."""
