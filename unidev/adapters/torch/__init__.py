"""PyTorch adapter: any unidev plugin as torch's PrivateUse1 device (see README.md here).

Importing this package does not import torch; ``unidev.torch.load()`` (or ``import torch``,
through the ``torch.backends`` entry point) binds the device.
"""
