"""Finding images in a request, reading their headers, and downscaling them."""
