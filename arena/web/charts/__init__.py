"""The pictures (docs/api.md, "Pictures"): drawn with matplotlib from the numbers the service
layer gives (arena/service/pictures.py, batch_view.py), as SVG and PNG from one figure, kept by
their numbers (cache.py). matplotlib (0.5 s to import) is imported by draw.py alone, on the
first picture drawn: `arena api` starts without it and a kept picture never needs it."""
