"""Finding images in a request, reading their headers, and downscaling them.

The modules, in the order an image flows through them::

    refs          find every image in a request body (data URLs, URLs)
    data_uri      split a data URL; validate its base64 as strictly as vLLM
    byte_sources  read an image by offset, decoding base64 only where asked
    headers/      one parser per common format, Pillow for the rest, and the dispatch
    probe         width x height as vLLM will see it, from the header bytes only
    remote        a URL image's first bytes, fetched through an SSRF gate
      addresses   which hosts and addresses the gate lets through
      resolver    DNS that pins each connection to the addresses the gate checked
    resize        downscale: re-encode an image at the smaller size its budget allows
"""
