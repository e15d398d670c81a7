"""The SQLite paraphrase database: the writer (`write.write_database`) and the reader (`db.ParaphraseDB`)."""
