// Keeps static libraries with no sources of their own linkable.
