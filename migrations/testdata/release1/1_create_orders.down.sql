DROP TABLE Backfills;
DROP TABLE Orders;
