"""TensorFlow adapter: unidev plugins as PluggableDevices."""
