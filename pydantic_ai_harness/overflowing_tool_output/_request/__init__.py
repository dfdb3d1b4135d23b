"""The rules a model request is held to (redaction, failure texts, the step budget, aging), lossless compaction and the handle ledger."""
