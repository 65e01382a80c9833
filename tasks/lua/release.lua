-- Top up the pool (a worker registered, the watchdog's sweep): release what capacity allows.
return release(load())
