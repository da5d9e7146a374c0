"""Frozen encoders: loading one (load.py `make_encoder`), the code that runs them (text.py, vision.py) and the
embed job (embed.py). Their table of names, sizes and sources is drift/core/encoder_registry.py."""
