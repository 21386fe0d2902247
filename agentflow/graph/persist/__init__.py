"""Durable checkpoints: the SQLite saver, its serializer, redaction and compression."""
