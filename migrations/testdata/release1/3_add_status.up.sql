ALTER TABLE Orders ADD COLUMN Status STRING(16);
CREATE INDEX OrdersByStatus ON Orders (Status);
