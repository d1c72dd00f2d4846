package gitopscluster_test

import (
	"os"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

func testLogger() logr.Logger {
	return logr.New(countingSink{LogSink: zap.New(zap.UseDevMode(true), zap.Level(zapLevel())).GetSink()})
}

// ctrlConfigSkipNameValidation lets tests start a second manager with the same controller name.
func ctrlConfigSkipNameValidation() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}
