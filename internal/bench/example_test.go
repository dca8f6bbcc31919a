package bench_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/option"

	"github.com/spanmutex/spanmutex/emulator"
	"github.com/spanmutex/spanmutex/internal/bench"
)

// Run measures both locks on a database of the emulator and prints the
// tables. NewClient passes Run's options on, so that Run can count RPCs.
func ExampleRun() {
	ctx := context.Background()
	emu, err := emulator.Start(ctx)
	if err != nil {
		log.Fatal(err) // it says how to install the emulator
	}
	defer emu.Close()
	results, err := bench.Run(ctx, bench.Config{
		NewClient: func(ctx context.Context, opts ...option.ClientOption) (*spanner.Client, error) {
			return emu.NewClient(ctx, emu.Database(), opts...)
		},
		Contenders: []int{1, 10},
		Duration:   5 * time.Second,
		Progress:   os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := bench.Format(os.Stdout, results); err != nil {
		log.Fatal(err)
	}
}

// Ratios compares the two locks at each number of contenders.
func ExampleRatios() {
	results := []bench.Result{
		{Kind: bench.Spanmutex, Contenders: 10, Duration: 10 * time.Second, Acquisitions: 300, InWindow: 300, RPCs: 3000,
			RPCsByMethod: map[string]int64{"Commit": 360, "ExecuteStreamingSql": 900}},
		{Kind: bench.Naive, Contenders: 10, Duration: 10 * time.Second, Acquisitions: 1500, InWindow: 1500, RPCs: 12000,
			RPCsByMethod: map[string]int64{"Commit": 5400, "StreamingRead": 4500}},
	}
	for _, r := range bench.Ratios(results) {
		fmt.Printf("N=%d: the naive lock makes %.1fx the commits and %.1fx the RPCs per acquisition; spanmutex acquires %.1fx as often\n",
			r.Contenders, r.Commits, r.RPCs, r.Throughput)
	}
	// Output:
	// N=10: the naive lock makes 3.0x the commits and 0.8x the RPCs per acquisition; spanmutex acquires 0.2x as often
}
