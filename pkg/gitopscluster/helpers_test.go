package gitopscluster_test

import (
	"os"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

func testLogger() logr.Logger {
	return logr.New(countingSink{LogSink: zap.New(zap.UseDevMode(true), zap.Level(zapLevel())).GetSink()})
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}
