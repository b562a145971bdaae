"""Hugging Face integrations on tandem (``tandem.train.huggingface.transformers``)."""
