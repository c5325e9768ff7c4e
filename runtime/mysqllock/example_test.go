package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/outboxgen/outboxgen/runtime/incident"
	"github.com/outboxgen/outboxgen/runtime/mysqllock"
)

// Names in the portable subset reach the server unchanged; any other name is hashed, so that
// it fits MySQL's 64 characters and two versions of a service take the same lock.
func ExampleServerName() {
	fmt.Println(mysqllock.ServerName("job:leave-accrual"))
	fmt.Println(mysqllock.ServerName("signup:Ops@Acme.example"))
	// Output:
	// job:leave-accrual
	// h:b688865cf8613bcdeec09670dfee541c7bab10709805adaf12ccad84da2184
}

// TryDo runs the critical section only if no other session holds the lock. ran=false with a
// nil error is the ordinary "another instance has it"; an error is never a silent skip.
func ExampleLocker_TryDo() {
	var db *sql.DB // sql.Open("mysql", "user:pass@tcp(host:3306)/app?parseTime=true")
	ctx := context.Background()
	locker := mysqllock.New(db, mysqllock.WithReporter(incident.Slog(nil)))

	ran, err := locker.TryDo(ctx, "billing:monthly-run", func(ctx context.Context) error {
		// ctx is cancelled if the watchdog finds the lock lost (context.Cause wraps ErrLockLost):
		// stop writing then, another instance may be running.
		return runBilling(ctx)
	})
	switch {
	case errors.Is(err, mysqllock.ErrLockLost):
		log.Printf("billing ran but lost its lock: check for a concurrent run: %v", err)
	case err != nil:
		log.Printf("billing: %v", err)
	case !ran:
		log.Print("billing: another instance is running it")
	}
}

// Do waits for the lock: here it serialises "create a user with this email", which a UNIQUE
// index cannot protect when soft-deleted users keep their address.
func ExampleLocker_Do() {
	var db *sql.DB
	ctx := context.Background()
	locker := mysqllock.New(db)

	email := "ops@acme.example"
	ran, err := locker.Do(ctx, "signup:"+email, 5*time.Second, func(ctx context.Context) error {
		return createUserUnlessActive(ctx, db, email)
	})
	if err != nil {
		log.Print(err)
	} else if !ran {
		log.Print("signup busy for this address: try again")
	}
}

// A daily job on every instance of a service: the running flag, the named lock and the run
// ledger make it run once per day.
func ExampleLocker_RunJob() {
	var db *sql.DB
	ctx := context.Background()
	locker := mysqllock.New(db)

	err := locker.RunJob(ctx, mysqllock.Job{
		Name:          "leave-accrual",
		Schedule:      mysqllock.Daily(0, 5, time.UTC),
		OncePerPeriod: true,
		Run:           accrueLeave,
	})
	if err != nil {
		log.Fatal(err) // only an invalid Job; RunJob otherwise blocks until ctx is done
	}
}

func runBilling(ctx context.Context) error                                       { return nil }
func createUserUnlessActive(ctx context.Context, db *sql.DB, email string) error { return nil }
func accrueLeave(ctx context.Context) error                                      { return nil }
