"""PyTorch adapter: any unidev plugin as a PrivateUse1 device."""
