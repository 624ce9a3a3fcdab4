"""unidev's conformance suite: proves a plugin against the op set and the numpy reference."""
