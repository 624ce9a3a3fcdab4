"""Model-level demos: small models trained through each framework on a device and on CPU."""
