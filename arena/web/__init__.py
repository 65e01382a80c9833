"""The HTTP API and its web page (docs/api.md): FastAPI routes over the service layer
(arena/service/), behind the front door (front_door.py). The app is built in app.py."""
