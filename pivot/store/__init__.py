"""The SQLite paraphrase database: the writer (`db.write_database`) and the reader (`db.ParaphraseDB`)."""
