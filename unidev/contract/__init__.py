"""The contract between unidev and a device plugin: both halves and what is generated from them."""
