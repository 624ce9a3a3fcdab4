"""unidev core: op set, reference kernels, plugin discovery, native loading, DeviceArray."""
