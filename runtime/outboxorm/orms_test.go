package outboxorm_test

import (
	"context"
	"database/sql"
	"testing"

	entdialect "entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jmoiron/sqlx"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/outboxgen/outboxgen/examples/events"
	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxorm/internal/entdb"
	"github.com/outboxgen/outboxgen/runtime/outboxorm/outboxent"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// The matrix. Each ORM's placeOrder is what its users write (docs/orms.md shows it): the order
// and its event in one transaction of the ORM, then Wake. Its abandon does the same and rolls
// back.
var ormCases = []ormCase{
	{"database-sql", openSQL},
	{"sqlx", openSQLX},
	{"gorm", func(t *testing.T, db *testdb.DB) orm { return openGORM(t, db, false) }},
	{"gorm-preparestmt", func(t *testing.T, db *testdb.DB) orm { return openGORM(t, db, true) }},
	{"ent", openEnt},
	{"bun", openBun},
}

func openSQL(t *testing.T, db *testdb.DB) orm {
	return orm{
		sqlDB: db.DB,
		pool:  db.DB,
		place: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			return placeOrderSQL(ctx, db.DB, item, e)
		},
		abandon: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES (?)", item); err != nil {
				return err
			}
			_, err = events.EnqueueWelcomeEmail(ctx, tx, e)
			return err
		},
	}
}

func placeOrderSQL(ctx context.Context, db *sql.DB, item string, e events.WelcomeEmail) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES (?)", item); err != nil {
		return err
	}
	if _, err := events.EnqueueWelcomeEmail(ctx, tx, e); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	outbox.Wake(db)
	return nil
}

func openSQLX(t *testing.T, db *testdb.DB) orm {
	x := sqlx.NewDb(db.DB, "mysql")
	return orm{
		sqlDB: db.DB,
		pool:  x,
		place: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			return placeOrderSQLX(ctx, x, item, e)
		},
		abandon: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			tx, err := x.BeginTxx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.NamedExecContext(ctx, "INSERT INTO orders (item) VALUES (:item)", map[string]any{"item": item}); err != nil {
				return err
			}
			_, err = events.EnqueueWelcomeEmail(ctx, tx, e)
			return err
		},
	}
}

func placeOrderSQLX(ctx context.Context, db *sqlx.DB, item string, e events.WelcomeEmail) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.NamedExecContext(ctx, "INSERT INTO orders (item) VALUES (:item)", map[string]any{"item": item}); err != nil {
		return err
	}
	if _, err := events.EnqueueWelcomeEmail(ctx, tx.Tx, e); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	outbox.Wake(db.DB)
	return nil
}

// Order is the orders row as GORM maps it.
type Order struct {
	ID   int64
	Item string
}

func openGORM(t *testing.T, db *testdb.DB, prepareStmt bool) orm {
	g := gormOn(t, db, prepareStmt)
	return orm{
		sqlDB: db.DB,
		pool:  g.Statement.ConnPool,
		place: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			return placeOrderGORM(ctx, g, item, e)
		},
		abandon: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			err := g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				if err := tx.Create(&Order{Item: item}).Error; err != nil {
					return err
				}
				if _, err := events.EnqueueWelcomeEmail(ctx, tx.Statement.ConnPool, e); err != nil {
					return err
				}
				return errRollback
			})
			if err == errRollback {
				return nil
			}
			return err
		},
	}
}

func placeOrderGORM(ctx context.Context, db *gorm.DB, item string, e events.WelcomeEmail) error {
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&Order{Item: item}).Error; err != nil {
			return err
		}
		_, err := events.EnqueueWelcomeEmail(ctx, tx.Statement.ConnPool, e)
		return err
	})
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		outbox.Wake(sqlDB)
	}
	return nil
}

// gormOn opens GORM on the test database's pool, so that workers and Wake share it.
func gormOn(t testing.TB, db *testdb.DB, prepareStmt bool) *gorm.DB {
	t.Helper()
	g, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: db.DB}), &gorm.Config{
		PrepareStmt: prepareStmt,
		Logger:      logger.Discard,
	})
	if err != nil {
		t.Fatalf("gorm.Open: %v", err)
	}
	return g
}

func openEnt(t *testing.T, db *testdb.DB) orm {
	client := entdb.NewClient(entdb.Driver(entsql.OpenDB(entdialect.MySQL, db.DB)))
	return orm{
		sqlDB: db.DB,
		pool:  outboxent.Tx(client),
		place: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			return placeOrderEnt(ctx, client, db.DB, item, e)
		},
		abandon: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			tx, err := client.Tx(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.Order.Create().SetItem(item).Save(ctx); err != nil {
				return err
			}
			_, err = events.EnqueueWelcomeEmail(ctx, outboxent.Tx(tx), e)
			return err
		},
	}
}

// placeOrderEnt takes the *sql.DB the client was opened on, for Wake.
func placeOrderEnt(ctx context.Context, client *entdb.Client, db *sql.DB, item string, e events.WelcomeEmail) error {
	tx, err := client.Tx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Order.Create().SetItem(item).Save(ctx); err != nil {
		return err
	}
	if _, err := events.EnqueueWelcomeEmail(ctx, outboxent.Tx(tx), e); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	outbox.Wake(db)
	return nil
}

// BunOrder is the orders row as bun maps it.
type BunOrder struct {
	bun.BaseModel `bun:"table:orders"`
	ID            int64 `bun:",pk,autoincrement"`
	Item          string
}

func openBun(t *testing.T, db *testdb.DB) orm {
	b := bun.NewDB(db.DB, mysqldialect.New())
	return orm{
		sqlDB: db.DB,
		pool:  b,
		place: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			return placeOrderBun(ctx, b, item, e)
		},
		abandon: func(ctx context.Context, item string, e events.WelcomeEmail) error {
			tx, err := b.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.NewInsert().Model(&BunOrder{Item: item}).Exec(ctx); err != nil {
				return err
			}
			_, err = events.EnqueueWelcomeEmail(ctx, tx.Tx, e)
			return err
		},
	}
}

func placeOrderBun(ctx context.Context, db *bun.DB, item string, e events.WelcomeEmail) error {
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(&BunOrder{Item: item}).Exec(ctx); err != nil {
			return err
		}
		_, err := events.EnqueueWelcomeEmail(ctx, tx.Tx, e)
		return err
	})
	if err != nil {
		return err
	}
	outbox.Wake(db.DB)
	return nil
}
