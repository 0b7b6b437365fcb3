"""How the project writes and reads its own files: atomic writes, JSON and config readers, run ids, redaction of secrets, private logs."""
