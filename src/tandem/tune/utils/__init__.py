"""``tandem.tune.utils``: the module path of ``ray.tune.utils`` (``mock_trainable`` holds
the ``MyTrainableClass`` that Ray's examples tune)."""
