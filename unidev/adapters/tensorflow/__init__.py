"""TensorFlow adapter: every usable unidev plugin as a TF PluggableDevice (no TF import)."""
