"""Personal data masked in every output of a job (the redact option), burnt out of its PDF."""
