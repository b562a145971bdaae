"""The train layer's public building blocks (re-exported by ``tandem.train``)."""
