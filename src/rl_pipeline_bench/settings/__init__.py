"""Settings: the validated config and the resolved run spec every job reads."""
