package outboxorm_test

import (
	"context"
	"testing"

	entdialect "entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jmoiron/sqlx"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/outboxgen/outboxgen/runtime/outbox"
	"github.com/outboxgen/outboxgen/runtime/outboxorm/internal/entdb"
	"github.com/outboxgen/outboxgen/runtime/outboxorm/outboxent"
	"github.com/outboxgen/outboxgen/runtime/outboxtest/testdb"
)

// The matrix. In each inTx, the line that passes the ORM's transaction to enqueue is the glue
// docs/orms.md shows.
var ormCases = []ormCase{
	{"database-sql", openSQL},
	{"sqlx", openSQLX},
	{"gorm", func(t *testing.T, db *testdb.DB) orm { return openGORM(t, db, false) }},
	{"gorm-preparestmt", func(t *testing.T, db *testdb.DB) orm { return openGORM(t, db, true) }},
	{"ent", openEnt},
	{"bun", openBun},
}

// finish commits tx, or rolls it back when commit is false or err is set.
func finish(tx interface {
	Commit() error
	Rollback() error
}, commit bool, err error) error {
	if err != nil || !commit {
		if rbErr := tx.Rollback(); rbErr != nil {
			return rbErr
		}
		return err
	}
	return tx.Commit()
}

func openSQL(t *testing.T, db *testdb.DB) orm {
	return orm{sqlDB: db.DB, pool: db.DB, inTx: func(ctx context.Context, item string, commit bool, enqueue func(outbox.DBTX) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES (?)", item); err != nil {
			return finish(tx, false, err)
		}
		return finish(tx, commit, enqueue(tx))
	}}
}

func openSQLX(t *testing.T, db *testdb.DB) orm {
	x := sqlx.NewDb(db.DB, "mysql")
	return orm{sqlDB: db.DB, pool: x, inTx: func(ctx context.Context, item string, commit bool, enqueue func(outbox.DBTX) error) error {
		tx, err := x.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.NamedExecContext(ctx, "INSERT INTO orders (item) VALUES (:item)", map[string]any{"item": item}); err != nil {
			return finish(tx, false, err)
		}
		return finish(tx, commit, enqueue(tx))
	}}
}

// gormOrder is the orders row as GORM maps it.
type gormOrder struct {
	ID   int64
	Item string
}

func (gormOrder) TableName() string { return "orders" }

func openGORM(t *testing.T, db *testdb.DB, prepareStmt bool) orm {
	g := gormOn(t, db, prepareStmt)
	return orm{sqlDB: db.DB, pool: g.Statement.ConnPool, inTx: func(ctx context.Context, item string, commit bool, enqueue func(outbox.DBTX) error) error {
		err := g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&gormOrder{Item: item}).Error; err != nil {
				return err
			}
			if err := enqueue(tx.Statement.ConnPool); err != nil {
				return err
			}
			if !commit {
				return errRollback
			}
			return nil
		})
		if err == errRollback {
			return nil
		}
		return err
	}}
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
	return orm{sqlDB: db.DB, pool: outboxent.Tx(client), inTx: func(ctx context.Context, item string, commit bool, enqueue func(outbox.DBTX) error) error {
		tx, err := client.Tx(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Order.Create().SetItem(item).Save(ctx); err != nil {
			return finish(tx, false, err)
		}
		return finish(tx, commit, enqueue(outboxent.Tx(tx)))
	}}
}

// bunOrder is the orders row as bun maps it.
type bunOrder struct {
	bun.BaseModel `bun:"table:orders"`
	ID            int64 `bun:",pk,autoincrement"`
	Item          string
}

func openBun(t *testing.T, db *testdb.DB) orm {
	b := bun.NewDB(db.DB, mysqldialect.New())
	return orm{sqlDB: db.DB, pool: b, inTx: func(ctx context.Context, item string, commit bool, enqueue func(outbox.DBTX) error) error {
		tx, err := b.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(&bunOrder{Item: item}).Exec(ctx); err != nil {
			return finish(tx, false, err)
		}
		return finish(tx, commit, enqueue(tx.Tx))
	}}
}
