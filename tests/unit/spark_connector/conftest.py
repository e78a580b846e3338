import warnings

with warnings.catch_warnings():
    # kafka-python 3.0.12 calls the deprecated importlib.resources.read_text at import time;
    # options.py imports it (lazily) to learn kafka-python's settings.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401
