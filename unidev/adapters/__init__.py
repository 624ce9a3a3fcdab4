"""Framework adapters: make unidev devices appear in PyTorch and TensorFlow."""
